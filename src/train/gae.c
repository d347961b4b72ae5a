/* gae.c: the backward recursion of gae.h, in double per environment. */
#include "train/gae.h"

#include <stddef.h>

void st_gae(int T, int B, const float *reward, const float *value, const uint8_t *done, const float *last_value,
            double gamma, double lambda, float *adv, float *ret) {
    for (int b = 0; b < B; b++) {
        double a = 0, next_v = last_value[b];
        for (int t = T - 1; t >= 0; t--) {
            size_t i = (size_t)t * B + b;
            double live = done[i] ? 0.0 : 1.0;
            double delta = reward[i] + gamma * next_v * live - value[i];
            a = delta + gamma * lambda * live * a;
            adv[i] = (float)a;
            ret[i] = (float)(a + value[i]);
            next_v = value[i];
        }
    }
}
