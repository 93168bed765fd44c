/* pluggable._fast: the CPython extension module that keeps the per-op path and the host
 * profiler's hot loops in C. Each part (one .c file) contributes a method table and an init
 * function; module.c gathers them. The runtime library's functions are reached through
 * pointers that `bind` receives from the ctypes side (the module links against nothing of
 * ours, so it loads wherever libpluggable_runtime.so was loaded from). */
#ifndef PLUGGABLE_FAST_INTERNAL_H_
#define PLUGGABLE_FAST_INTERNAL_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Kinds of host tracer record (host_tracer.py: OP, COPY, ALLOC, FREE, ANNOTATION = range(5)):
 * oprun.c makes OP and FREE records, hostplane.c encodes all of them. */
enum { REC_OP, REC_COPY, REC_ALLOC, REC_FREE, REC_ANNOTATION, REC_KINDS };

/* The part that runs remembered ops (oprun.c). */
extern PyMethodDef pg_oprun_methods[];
int pg_oprun_init(PyObject* module);

/* Python host callbacks and their pending count (hostcall.c): nonzero while any callback
 * handed to a plugin has not finished, when a kernel run must not keep the GIL. */
extern PyMethodDef pg_hostcall_methods[];
int pg_host_callbacks_pending(void);

/* The host tracer's plane encoder (hostplane.c). */
extern PyMethodDef pg_hostplane_methods[];
int pg_hostplane_init(PyObject* module);

#endif /* PLUGGABLE_FAST_INTERNAL_H_ */
