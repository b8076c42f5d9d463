/* tests/emulator/kernel_undefs.h - forget the prelude and every macro kernels_src/ defines,
   so that the next specialization of the sources can be included (cuda_emulator.h). A new
   kernel macro whose value depends on the prelude belongs here too: the compiler says so. */
#undef BQ_FT
#undef BQ_IT
#undef BQ_QMIN
#undef BQ_QMAX
#undef BQ_ST
#undef BQ_LIN_OP
#undef BQ_WST
#undef BQ_ASF32
#undef BQ_ASYM
#undef BQ_DSCOPE
#undef BQ_OP
#undef BQ_BWD
#undef BQ_GRAN
#undef BQ_U
#undef BQ_APPLY_J
#undef BQ_BK
#undef BQ_BLOCK
#undef BQ_CLAMP_BIG
#undef BQ_CPT
#undef BQ_C_MAX
#undef BQ_DU
#undef BQ_GEMV_UNROLL
#undef BQ_HAS_IN1
#undef BQ_LEAD_SIZE
#undef BQ_MAX2
#undef BQ_OUT_LEADS
#undef BQ_P
#undef BQ_RCP_DOWN
#undef BQ_RCP_HI
#undef BQ_RCP_LO
#undef BQ_RCP_UP
#undef BQ_TILE
#undef BQ_VEC
#undef BQ_WG_STAGES
#undef BQ_WGMMA
