# checkpoint_check.py: checks of ssmtrade checkpoints and run folders for the CLI tests
# (test_sigkill.sh, test_signals.sh). A whole checkpoint: header length, JSON, every tensor's
# bytes inside the data, the data exactly covered, the ssmtrade format.
# checkpoint_check.py whole FILE...: each file is a whole ssmtrade checkpoint; prints "FILE UPDATE".
# checkpoint_check.py update FILE: prints FILE's update; exit 1 with the reason when it is not whole.
# checkpoint_check.py same A B: the tensors of A and B are byte-identical.
# checkpoint_check.py metrics FILE LAST: the complete lines are updates 1..X, X in {LAST, LAST+1}; prints X.
# checkpoint_check.py close A B TOL: the weights (every tensor but adam.*, env.*, data.*) of A and B within
#   TOL relative (norm of the difference over the norm of B), the environments' tensors byte-identical
#   (scripts/gpu-multi.sh: N GPUs against one).
import array, json, math, struct, sys
SIZES = {'F32': 4, 'F64': 8, 'I32': 4, 'I64': 8, 'U8': 1}
def load(path):
    b = open(path, 'rb').read()
    if len(b) < 8: raise ValueError('%d bytes' % len(b))
    n = struct.unpack('<Q', b[:8])[0]
    if 8 + n > len(b): raise ValueError('header length %d exceeds the file' % n)
    h = json.loads(b[8:8 + n])
    meta = h.pop('__metadata__', {})
    spans = []
    for name, t in h.items():
        count = 1
        for s in t['shape']: count *= s
        a, e = t['data_offsets']
        if e - a != count * SIZES[t['dtype']]: raise ValueError('tensor %s: %d bytes for its shape' % (name, e - a))
        spans.append((a, e))
    pos = 0
    for a, e in sorted(spans):
        if a != pos: raise ValueError('gap or overlap at data byte %d' % a)
        pos = e
    if pos != len(b) - 8 - n: raise ValueError('tensors end at %d of %d data bytes' % (pos, len(b) - 8 - n))
    if meta.get('format') != 'ssmtrade-checkpoint-1': raise ValueError('format %r' % meta.get('format'))
    data = b[8 + n:]
    return meta, {k: data[t['data_offsets'][0]:t['data_offsets'][1]] for k, t in h.items()}
mode = sys.argv[1]
if mode == 'update':
    try:
        meta, _ = load(sys.argv[2])
    except Exception as ex:
        sys.exit('%s: %s' % (sys.argv[2], ex))
    print(meta['update'])
if mode == 'whole':
    bad = 0
    for p in sys.argv[2:]:
        try:
            meta, _ = load(p)
            print(p, meta['update'])
        except Exception as ex:
            print('BAD', p, ex)
            bad += 1
    sys.exit(1 if bad else 0)
if mode == 'same':
    (_, a), (_, b) = load(sys.argv[2]), load(sys.argv[3])
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if diff: sys.exit('%d of %d tensors differ, e.g. %s' % (len(diff), len(a), diff[:5]))
    print('%d tensors identical' % len(a))
if mode == 'metrics':
    last = int(sys.argv[3])
    text = open(sys.argv[2]).read()
    lines = text.split('\n')[:-1]  # a torn last line (no newline) is not a line yet
    ups = [json.loads(l)['update'] for l in lines]
    if ups != list(range(1, len(ups) + 1)): sys.exit('metrics updates are not 1..n: %s' % ups)
    if len(ups) not in (last, last + 1): sys.exit('metrics end at update %d, last.safetensors is %d' % (len(ups), last))
    print(len(ups))
if mode == 'close':
    (_, a), (_, b) = load(sys.argv[2]), load(sys.argv[3])
    tol = float(sys.argv[4])
    names = sorted(k for k in b if not k.startswith(('adam.', 'env.', 'data.')))
    d2 = n2 = 0.0
    for k in names:
        x, y = array.array('f', a[k]), array.array('f', b[k])
        d2 += sum((u - v) * (u - v) for u, v in zip(x, y))
        n2 += sum(v * v for v in y)
    rel = math.sqrt(d2 / n2) if n2 > 0 else math.sqrt(d2)
    env = [k for k in b if k.startswith('env.') and a.get(k) != b[k]]
    print('weights: relative difference %.3e over %d tensors (bound %g); environment tensors differing: %d' %
          (rel, len(names), tol, len(env)))
    if rel > tol or env: sys.exit(1)
