/* xpu_status.c: the status helpers shared by the platform, memory, stream, fault-injection
 * and profiler files (xpu_plugin.c, xpu_memory.c, xpu_stream.c, xpu_faults.c,
 * xpu_profiler.c).
 *
 * Holds:
 *   xpu_status       sets a TF_Status to a code and a printf-formatted message (a NULL status
 *                    is ignored, for callbacks that cannot report)
 *   xpu_check_size   reports a host struct whose struct_size is below what the plugin needs
 *
 * Both only call TF_SetStatus, which the host provides. Kernels report their errors through
 * the kernel API instead (xpu_fail and xpu_construction_fail, xpu_kernels.h).
 */
#include "xpu_internal.h"

#include <stdarg.h>
#include <stdio.h>

void xpu_status(TF_Status* status, TF_Code code, const char* fmt, ...) {
  if (status == NULL) return;
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  TF_SetStatus(status, code, message);
}

bool xpu_check_size(TF_Status* status, const char* fn, const char* struct_name, size_t got,
                    size_t needed) {
  if (got >= needed) return true;
  xpu_status(status, TF_INVALID_ARGUMENT,
             "%s: %s.struct_size is %zu, but the XPU plugin needs at least %zu (set it to the "
             "header's *_STRUCT_SIZE)", fn, struct_name, got, needed);
  return false;
}
