/* tensorflow/c/c_api_macros.h: macros shared by every header of the plugin C API.
 *
 * Part of the pluggable project's rewrite of TensorFlow's plugin headers: file paths, names
 * and values follow TensorFlow 2.21 so that plugin sources build against either tree.
 *
 *   TF_CAPI_EXPORT      marks functions that the host exports and plugins call
 *                       (TF_NewStatus, TF_GetStream, ...). Plugins never link against the
 *                       host by name: those symbols resolve when the plugin is loaded.
 *   TF_Bool             the C API's one-byte boolean (unsigned char), not the TF_BOOL dtype.
 *   TF_OFFSET_OF_END    the byte offset just past MEMBER; every *_STRUCT_SIZE macro is
 *                       TF_OFFSET_OF_END(struct, its last field), so the size a struct
 *                       reports excludes trailing padding.
 */
#ifndef TENSORFLOW_C_C_API_MACROS_H_
#define TENSORFLOW_C_C_API_MACROS_H_

#include <stddef.h> /* offsetof, used by TF_OFFSET_OF_END */

#ifdef SWIG
#define TF_CAPI_EXPORT
#elif defined(_WIN32)
#ifdef TF_COMPILE_LIBRARY
#define TF_CAPI_EXPORT __declspec(dllexport)
#else
#define TF_CAPI_EXPORT __declspec(dllimport)
#endif
#elif defined(TF_CAPI_WEAK)
#define TF_CAPI_EXPORT __attribute__((visibility("default"))) __attribute((weak))
#else
#define TF_CAPI_EXPORT __attribute__((visibility("default")))
#endif

#ifndef TF_Bool
#define TF_Bool unsigned char
#endif

#ifndef TF_OFFSET_OF_END
#define TF_OFFSET_OF_END(TYPE, MEMBER) \
  (offsetof(TYPE, MEMBER) + sizeof(((TYPE *)0)->MEMBER))
#endif

#endif /* TENSORFLOW_C_C_API_MACROS_H_ */
