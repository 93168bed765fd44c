/* tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h: the pluggable profiler C
 * API, through which a plugin adds its device's activity to a profile. Layouts, names and
 * signatures are those of TensorFlow 2.21; see include/ABI.md.
 *
 * Conventions
 *   TF_ structs are filled by the host, TP_ structs by the plugin, unless a field says
 *       otherwise. (Functions and macros of this API are all TP_ / TF_InitProfiler.)
 *   struct_size  first field, set by BOTH sides, with the same rules as the StreamExecutor
 *       API: fields ending past struct_size are absent; *_STRUCT_SIZE is
 *       TF_OFFSET_OF_END(struct, last field); fields are only ever appended.
 *   ext   second field: NULL unless a plugin hangs an extension chain off a TP_ struct.
 *   Versions  TP_MAJOR.TP_MINOR.TP_PATCH, passed by the host in
 *       TF_ProfilerRegistrationParams; another major version is rejected.
 *
 * A profiling session: start, stop, then collect_data_xspace twice, first with a NULL buffer
 * to learn the size, then with a buffer of that size to receive a serialized
 * tensorflow.profiler.XSpace protocol buffer. Sessions may follow one another; a session in
 * which the device did no work should produce an empty XSpace (size 0 is allowed).
 */
#ifndef TENSORFLOW_C_EXPERIMENTAL_PLUGGABLE_PROFILER_PLUGGABLE_PROFILER_H_
#define TENSORFLOW_C_EXPERIMENTAL_PLUGGABLE_PROFILER_PLUGGABLE_PROFILER_H_
#include <stddef.h>
#include <stdint.h>

#include "tensorflow/c/c_api_macros.h"
#include "tensorflow/c/tf_status.h"

#define TP_MAJOR 0
#define TP_MINOR 0
#define TP_PATCH 1

#ifdef __cplusplus
extern "C" {
#endif

/* The profiler. Host memory, filled by TF_InitProfiler. */
typedef struct TP_Profiler {
  size_t struct_size;
  void* ext;
  const char* device_type; /* the device type profiled, e.g. "XPU"; outlives the profiler */
} TP_Profiler;

#define TP_PROFILER_STRUCT_SIZE TF_OFFSET_OF_END(TP_Profiler, device_type)

/* Profiler callbacks, all required. Host memory, filled by TF_InitProfiler. */
typedef struct TP_ProfilerFns {
  size_t struct_size;
  void* ext;

  /* Begins recording device activity. */
  void (*start)(const TP_Profiler* profiler, TF_Status* status);

  /* Ends recording. */
  void (*stop)(const TP_Profiler* profiler, TF_Status* status);

  /* With buffer == NULL: stores the size of the serialized XSpace in *size_in_bytes. With a
   * buffer of *size_in_bytes bytes: writes the XSpace into it. The data of a session is
   * handed out once; a later call returns an empty XSpace until the next start/stop. */
  void (*collect_data_xspace)(const TP_Profiler* profiler, uint8_t* buffer,
                              size_t* size_in_bytes, TF_Status* status);
} TP_ProfilerFns;

#define TP_PROFILER_FNS_STRUCT_SIZE \
  TF_OFFSET_OF_END(TP_ProfilerFns, collect_data_xspace)

/* Argument of TF_InitProfiler. The host owns all memory here and points `profiler` and
 * `profiler_fns` at zeroed structs with struct_size set; the plugin fills them and the two
 * destroy callbacks. */
typedef struct TF_ProfilerRegistrationParams {
  size_t struct_size;
  void* ext;

  /* The host's profiler C API version. */
  int32_t major_version;
  int32_t minor_version;
  int32_t patch_version;

  TP_Profiler* profiler;        /* filled by the plugin */
  TP_ProfilerFns* profiler_fns; /* filled by the plugin */
  /* [Optional] for the pluggable host, required by TensorFlow. Set by the plugin; they free
   * what the plugin put inside the struct, not the struct. */
  void (*destroy_profiler)(TP_Profiler* profiler);
  void (*destroy_profiler_fns)(TP_ProfilerFns* profiler_fns); /* [Optional], as above */
} TF_ProfilerRegistrationParams;

#define TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE \
  TF_OFFSET_OF_END(TF_ProfilerRegistrationParams, destroy_profiler_fns)

/* The plugin's profiler entry point (defined by the plugin; optional for a plugin). */
void TF_InitProfiler(TF_ProfilerRegistrationParams* params, TF_Status* status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORFLOW_C_EXPERIMENTAL_PLUGGABLE_PROFILER_PLUGGABLE_PROFILER_H_ */
