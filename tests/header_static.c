/* header_static.c - BARACUDA_QUANT_STATIC: every function static, so two translation units
   may each carry a private copy. This one includes the header twice (guards must hold). */
#define BARACUDA_QUANT_STATIC
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"
#include "../baracuda_quant.h"
#include <stdio.h>

int main(void) {
  printf("%s %u\n", bq_version_string(), bq_version());
  return bq_version() == ((BQ_VERSION_MAJOR << 16) | (BQ_VERSION_MINOR << 8) | BQ_VERSION_PATCH) ? 0 : 1;
}
