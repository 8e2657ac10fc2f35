/* ucase.h - upper and lower case of code points, for str.upper() and the
 * case filters: ASCII, Latin-1, Latin Extended-A/B and Additional, Greek,
 * Cyrillic, Armenian, fullwidth Latin (docs/templates.md: other scripts
 * keep their case). */
#ifndef COLI_CHAT_UCASE_H
#define COLI_CHAT_UCASE_H

#include <stdint.h>

uint32_t coli__tcase_upper(uint32_t cp);
uint32_t coli__tcase_lower(uint32_t cp);
/* Whether cp has case (Python's "cased"): a letter with an upper or lower form. */
int coli__tcase_cased(uint32_t cp);

#endif
