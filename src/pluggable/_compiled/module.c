/* pluggable._compiled's module object: gathers the method tables of its parts. */
#include "compiled_internal.h"

static PyMethodDef* const parts[] = {pg_oprun_methods, pg_constplans_methods,
                                     pg_hostcall_methods, pg_hostplane_methods,
                                     pg_blocking_methods, pg_taperec_methods,
                                     pg_xspacecheck_methods};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT, "pluggable._compiled",
    "The per-op path, copies, device memory, Python host callbacks, blocking plugin calls with "
    "a deadline and the host profiler's hot loops, in C.", -1, NULL,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__compiled(void) {
  PyObject* module = PyModule_Create(&fast_module);
  if (module == NULL) return NULL;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (PyModule_AddFunctions(module, parts[i]) < 0) goto fail;
  }
  if (pg_oprun_init(module) < 0 || pg_copies_init(module) < 0 || pg_memory_init(module) < 0 ||
      pg_hostplane_init(module) < 0 || pg_blocking_init(module) < 0 ||
      pg_xspacecheck_init(module) < 0 || pg_ledger_init(module) < 0) {
    goto fail;
  }
  return module;
fail:
  Py_DECREF(module);
  return NULL;
}
