// header_cxx.cpp - the whole header, implementation included, compiles as C++17 with
// -Wall -Wextra -Werror and no CUDA headers, and links with libc, libdl, libpthread, libm.
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"
#include <cstdio>

int main() {
  bq_desc d{};
  d.op = BQ_QUANTIZE;
  d.float_type = BQ_BF16;
  char sku[256];
  bq_status st = bq_sku(&d, 90, sku, sizeof sku);
  std::printf("%s %s\n", bq_version_string(), st == BQ_SUCCESS ? sku : bq_last_error());
  return st == BQ_SUCCESS ? 0 : 1;
}
