/* Declarations shared by the host runtime library's translation units, and the few functions
 * the Python host calls that are not part of TensorFlow's API. Plugins never see these. */
#ifndef PLUGGABLE_RUNTIME_INTERNAL_H_
#define PLUGGABLE_RUNTIME_INTERNAL_H_

#include "tensorflow/c/tf_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes `s` OK again, dropping its message and payloads, so one status serves many calls. */
TF_CAPI_EXPORT void pluggable_ResetStatus(TF_Status* s);

#ifdef __cplusplus
}
#endif

#endif
