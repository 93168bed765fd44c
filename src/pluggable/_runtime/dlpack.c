/* dlpack.c: the two C functions behind the DLPack capsules the Python host exports
 * (src/pluggable/dlpack.py). Nothing here is TensorFlow's API and plugins never call it.
 *
 * Why C: a consumer calls a managed tensor's deleter from wherever it drops the tensor, and
 * CPython destroys a capsule from wherever its last reference goes, both possibly while an
 * exception is being raised, or (for the deleter) on a thread that does not hold the GIL. A
 * ctypes callback cannot run Python code in either state. These functions take the GIL, set
 * the pending exception aside, run the host's Python release function, and put everything
 * back.
 *
 * The Python C API is looked up with dlsym in the running process rather than linked, so the
 * runtime library does not depend on a particular libpython (it is always loaded into a
 * Python process; pluggable_DLPackInit reports when the lookup fails).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "dlpack/dlpack.h"
#include "runtime_internal.h"

typedef void (*ReleaseFn)(void* managed);

static struct {
  int (*gil_ensure)(void);
  void (*gil_release)(int);
  void (*err_fetch)(void**, void**, void**);
  void (*err_restore)(void*, void*, void*);
  const char* (*capsule_name)(void*);
  void* (*capsule_pointer)(void*, const char*);
  int (*is_finalizing)(void);
} py;

static ReleaseFn g_release; /* set once, before any export, never changed */

int pluggable_DLPackInit(void (*release)(void* managed)) {
  py.gil_ensure = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
  py.gil_release = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
  py.err_fetch = (void (*)(void**, void**, void**))dlsym(RTLD_DEFAULT, "PyErr_Fetch");
  py.err_restore = (void (*)(void*, void*, void*))dlsym(RTLD_DEFAULT, "PyErr_Restore");
  py.capsule_name = (const char* (*)(void*))dlsym(RTLD_DEFAULT, "PyCapsule_GetName");
  py.capsule_pointer = (void* (*)(void*, const char*))dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer");
  /* Public since Python 3.13; underscored before. */
  py.is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
  if (py.is_finalizing == NULL) {
    py.is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
  }
  if (py.gil_ensure == NULL || py.gil_release == NULL || py.err_fetch == NULL ||
      py.err_restore == NULL || py.capsule_name == NULL || py.capsule_pointer == NULL ||
      py.is_finalizing == NULL || release == NULL) {
    return -1;
  }
  g_release = release;
  return 0;
}

/* The deleter of every managed tensor the host exports (versioned or legacy: both take the
 * struct's address). */
void pluggable_DLPackDeleter(void* managed) {
  /* While the interpreter shuts down, Python code (and the release function's module) may
   * already be gone; the process is about to give all its memory back anyway. */
  if (py.is_finalizing()) return;
  int gil = py.gil_ensure();
  void *type = NULL, *value = NULL, *traceback = NULL;
  py.err_fetch(&type, &value, &traceback);
  g_release(managed);
  py.err_restore(type, value, traceback);
  py.gil_release(gil);
}

/* The destructor of every capsule the host exports: frees the tensor when no consumer took
 * it (a consumer renames the capsule to "used_dltensor..." when it does). Runs with the GIL
 * held, as every capsule destructor does. */
void pluggable_DLPackCapsuleDestructor(void* capsule) {
  const char* name = py.capsule_name(capsule);
  if (name == NULL) return;
  if (strcmp(name, "dltensor_versioned") == 0) {
    DLManagedTensorVersioned* m = py.capsule_pointer(capsule, name);
    if (m != NULL && m->deleter != NULL) m->deleter(m);
  } else if (strcmp(name, "dltensor") == 0) {
    DLManagedTensor* m = py.capsule_pointer(capsule, name);
    if (m != NULL && m->deleter != NULL) m->deleter(m);
  }
}
