/* engine/nocuda/absent.c — built instead of engine/cuda/ when the CUDA
 * toolkit is not found: the runtime has no device backend to bring up. */
#include "../engine_impl.h"

const rp_backend_ops *const rp__gpu_backend = NULL;
