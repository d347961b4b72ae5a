/* gae.h: generalised advantage estimation over a rollout (DESIGN section 6).
 *
 * Arrays are [T, B] (step-major). done[t, b] = 1 when the episode of env b
 * ended with step t (every done is a time limit; the context carries the
 * episode progress, so the state that ends an episode is terminal by
 * construction and is not bootstrapped). last_value[b] is V of the state
 * after the last step.
 *   delta_t = r_t + gamma V_{t+1} (1 - done_t) - V_t
 *   A_t     = delta_t + gamma lambda (1 - done_t) A_{t+1};   ret_t = A_t + V_t */
#ifndef ST_GAE_H
#define ST_GAE_H

#include <stdint.h>

void st_gae(int T, int B, const float *reward, const float *value, const uint8_t *done, const float *last_value,
            double gamma, double lambda, float *adv, float *ret);

#endif
