/* whole_number.h: reading a whole number given as text (a flag's value, a
 * config value), exactly.
 *
 * Digits (with an optional sign) are read as a 64-bit integer, every digit
 * kept: a seed of 2^53 + 1 stays 2^53 + 1. Other spellings a user may write
 * for a whole number (1e6, 2048.0) are read as a double and accepted only
 * while a double holds them exactly (|x| <= 2^53). Anything else is an
 * ST_ERR_INPUT error naming the flag and the text:
 *   "--NAME: 'TEXT' is not a whole number"
 *   "--NAME: 'TEXT' is out of range (at most 9223372036854775807)"
 *   "--NAME: 'TEXT' is 2^53 or more written as a double (...)" */
#ifndef ST_WHOLE_NUMBER_H
#define ST_WHOLE_NUMBER_H

int st_parse_whole(const char *name, const char *text, long long *out);

/* 2^53: the largest magnitude up to which every whole number is a double. */
#define ST_EXACT_DOUBLE_MAX 9007199254740992.0

/* A JSON number (a double once parsed) as text for st_parse_whole and
 * strtod (into buf, n >= 32): "%.17g", except a whole number of 2^53 or
 * more, whose digits may already be lost (2^53 + 1 parses as 2^53): that
 * one in exponent form, which st_parse_whole refuses with the reason while
 * strtod (a double flag) reads it as it is. */
void st_json_number_text(double v, char *buf, unsigned n);

#endif
