/* test_cuda_philox.c: the GPU's Philox draws equal the CPU's, bit for bit,
 * across streams, seeds and counters past 2^32. Skips without a GPU. */
#include "core/device.h"
#include "core/philox.h"
#include "test.h"
#ifdef ST_HAVE_CUDA
#include "cuda/philox_kernel.h"
#endif

int main(void) {
    if (st_cuda_devices() == 0) {
        printf("skipped: %s\n", st_cuda_describe());
        return ST_TEST_SKIP;
    }
#ifdef ST_HAVE_CUDA
    printf("device: %s\n", st_cuda_describe());
    enum { N = 100000 };
    static uint32_t gpu[4 * N];
    const uint64_t seeds[] = {0, 16962, 0xFFFFFFFFFFFFull};
    const uint64_t firsts[] = {0, (1ull << 32) - 7};
    for (int s = 0; s < 3; s++)
        for (int f = 0; f < 2; f++) {
            CHECK(st_cuda_philox_draws(seeds[s], ST_STREAM_ACTION, firsts[f], N, gpu) == 0, "kernel");
            int same = 1;
            for (int i = 0; i < N && same; i++) {
                st_philox4 c = st_philox_draw(seeds[s], ST_STREAM_ACTION, firsts[f] + (uint64_t)i);
                for (int k = 0; k < 4; k++) same &= c.v[k] == gpu[4 * i + k];
            }
            CHECK(same, "GPU and CPU Philox draws differ (seed %llu, first %llu)", (unsigned long long)seeds[s],
                  (unsigned long long)firsts[f]);
        }
#endif
    TEST_MAIN_END();
}
