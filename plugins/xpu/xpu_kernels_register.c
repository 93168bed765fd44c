/* xpu_kernels_register.c: TF_InitKernel, the XPU plugin's kernel entry point.
 *
 * Holds:
 *   TF_InitKernel      registers the kernels of every kernel file (each file's table of
 *                      XpuKernelDef, through its xpu_register_*_kernels), the variable kernels
 *                      only when the host exports kernels_experimental.h's functions, and
 *                      sets g_launch_blocking
 *   g_launch_blocking  whether compute() waits for its work to run (read in xpu_kernels_api.c)
 * xpu_register_defs (xpu_kernels_api.c) turns a table into TensorFlow kernel builders;
 * README.md ("Kernels") lists every op with its types.
 */
#include "xpu_kernels.h"

/* Whether compute() waits for its work to run ("launch blocking", as CUDA_LAUNCH_BLOCKING=1
 * makes a GPU do). A host that exports the variable functions (pluggable) gets the XPU's
 * variable kernels, which order every update on the stream, and asynchronous kernels. A host
 * that does not (TensorFlow 2.21) runs its own variable kernels on the host thread with no
 * regard for the stream: there, each kernel's results are complete when compute() returns, so
 * those host-side updates read and write settled memory. Set once by TF_InitKernel. */
bool g_launch_blocking = false;

__attribute__((visibility("default"))) void TF_InitKernel(void) {
  g_launch_blocking = !xpu_host_has_variable_api();
  xpu_register_elementwise_kernels();
  xpu_register_shape_kernels();
  xpu_register_reduction_kernels();
  xpu_register_matmul_kernels();
  xpu_register_array_kernels();
  xpu_register_nn_kernels();
  if (xpu_host_has_variable_api()) xpu_register_variable_kernels();
}
