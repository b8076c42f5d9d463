/* baracuda_quant._fast: the eager per-tensor quantize and dequantize of ops.py in C, for
   the host time of a small call (interpreter steps and a ctypes call cost as much as the
   launch). The stable ABI (one build serves every CPython from 3.9), no torch headers and no
   CUDA: torch is reached through the callables ops.py hands to setup(), and the library
   through the addresses of _capi.c's bq_py_run_tensor in the package's shared object (one
   copy of the library per process). Each function returns the output, or None where the call
   is not for this path (not a plain eager tensor call of a geometry seen before, or a status
   other than 0), and ops.py then takes its Python path, which reports any error. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*run_tensor_fn)(const void *plan, const void *args, void *x, void *y, double scale,
                             int64_t zero_point, void *stream);

static struct {
  PyObject *tensor_type; /* torch.Tensor */
  PyObject *table;       /* ops._fast: geometry key -> _core.Prepared */
  PyObject *empty_like, *raw_stream, *modes, *tracing, *functorch, *grad_enabled;
  PyObject *tag_q, *tag_dq, *s_shape, *s_stride, *s_dtype, *s_get_device, *s_data_ptr, *s_requires_grad,
      *s_plan, *s_args_address;
  run_tensor_fn run_tensor;
} F;

static PyObject *call0(PyObject *f) { return PyObject_CallObject(f, NULL); }
static PyObject *none(void) {
  Py_INCREF(Py_None);
  return Py_None;
}

/* 1 where nothing traces or transforms, no dispatch mode is on and x records no gradient
   (ops._eager, less torch.compile's check, which ops.py makes before calling here: the
   compiler folds it and never reaches this module); 0 where not; -1 with an exception set */
static int eager(PyObject *x) {
  PyObject *fns[3] = {F.modes, F.tracing, F.functorch};
  for (int i = 0; i < 3; i++) {
    PyObject *r = call0(fns[i]);
    if (!r) return -1;
    int on = i == 1 ? r != Py_None : PyObject_IsTrue(r); /* (the tracing state: None when off) */
    Py_DECREF(r);
    if (on) return on < 0 ? -1 : 0;
  }
  PyObject *rg = PyObject_GetAttr(x, F.s_requires_grad);
  if (!rg) return -1;
  int req = PyObject_IsTrue(rg);
  Py_DECREF(rg);
  if (req <= 0) return req == 0 ? 1 : -1;
  PyObject *g = call0(F.grad_enabled);
  if (!g) return -1;
  int grad = PyObject_IsTrue(g);
  Py_DECREF(g);
  return grad < 0 ? -1 : !grad;
}

static int ptr_of(PyObject *t, void **p) {
  PyObject *r = PyObject_CallMethodObjArgs(t, F.s_data_ptr, NULL);
  if (!r) return -1;
  *p = PyLong_AsVoidPtr(r);
  Py_DECREF(r);
  return PyErr_Occurred() ? -1 : 0;
}

/* The shared body: key (tag, x.shape, x.stride(), x.dtype, x.get_device(), *tail), the kept
   call for it, then y = empty_like(x, dtype=out_dtype) and the run. */
static PyObject *per_tensor(PyObject *tag, PyObject *x, PyObject *scale, PyObject *zero_point, PyObject *out_dtype,
                            PyObject *tail1, PyObject *tail2) {
  if (!F.run_tensor || Py_TYPE(x) != (PyTypeObject *)F.tensor_type || !PyFloat_CheckExact(scale) ||
      !PyLong_CheckExact(zero_point))
    Py_RETURN_NONE;
  int overflow = 0;
  long long zp = PyLong_AsLongLongAndOverflow(zero_point, &overflow);
  if (overflow || zp < INT32_MIN || zp > INT32_MAX) Py_RETURN_NONE; /* the Python path names the range */
  if (zp == -1 && PyErr_Occurred()) return NULL;
  double s = PyFloat_AsDouble(scale);
  PyObject *shape = NULL, *stride = NULL, *dtype = NULL, *dev = NULL, *key = NULL, *prep = NULL, *y = NULL,
           *kw = NULL, *args = NULL, *out = NULL, *stream = NULL;
  void *plan, *a, *px, *py;
  if (!(shape = PyObject_GetAttr(x, F.s_shape)) || !(stride = PyObject_CallMethodObjArgs(x, F.s_stride, NULL)) ||
      !(dtype = PyObject_GetAttr(x, F.s_dtype)) || !(dev = PyObject_CallMethodObjArgs(x, F.s_get_device, NULL)))
    goto done;
  key = tail1 ? PyTuple_Pack(8, tag, shape, stride, dtype, dev, out_dtype, tail1, tail2)
              : PyTuple_Pack(6, tag, shape, stride, dtype, dev, out_dtype);
  if (!key) goto done;
  prep = PyDict_GetItemWithError(F.table, key); /* borrowed */
  if (!prep) {
    if (!PyErr_Occurred()) out = none();
    goto done;
  }
  Py_INCREF(prep);
  int e = eager(x);
  if (e <= 0) {
    if (e == 0) out = none();
    goto done;
  }
  PyObject *pl = PyObject_GetAttr(prep, F.s_plan), *ad = pl ? PyObject_GetAttr(prep, F.s_args_address) : NULL;
  plan = pl ? PyLong_AsVoidPtr(pl) : NULL;
  a = ad ? PyLong_AsVoidPtr(ad) : NULL;
  Py_XDECREF(pl);
  Py_XDECREF(ad);
  if (PyErr_Occurred()) goto done;
  if (!(kw = PyDict_New()) || PyDict_SetItem(kw, F.s_dtype, out_dtype) || !(args = PyTuple_Pack(1, x)) ||
      !(y = PyObject_Call(F.empty_like, args, kw)))
    goto done;
  if (ptr_of(x, &px) || ptr_of(y, &py) || !(stream = PyObject_CallFunctionObjArgs(F.raw_stream, dev, NULL)))
    goto done;
  void *st = PyLong_AsVoidPtr(stream);
  if (PyErr_Occurred()) goto done;
  if (F.run_tensor(plan, a, px, py, s, (int64_t)zp, st) == 0) {
    Py_INCREF(y);
    out = y;
  } else {
    out = none();
  }
done:
  Py_XDECREF(shape), Py_XDECREF(stride), Py_XDECREF(dtype), Py_XDECREF(dev), Py_XDECREF(key), Py_XDECREF(prep);
  Py_XDECREF(y), Py_XDECREF(kw), Py_XDECREF(args), Py_XDECREF(stream);
  return out;
}

/* quantize_per_tensor(x, scale, zero_point, dtype, quant_min, quant_max) */
static PyObject *fast_q(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *x, *scale, *zp, *dtype, *qmin, *qmax;
  if (!PyArg_UnpackTuple(args, "quantize_per_tensor", 6, 6, &x, &scale, &zp, &dtype, &qmin, &qmax)) return NULL;
  return per_tensor(F.tag_q, x, scale, zp, dtype, qmin, qmax);
}

/* dequantize_per_tensor(q, scale, zero_point, out_dtype) */
static PyObject *fast_dq(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *q, *scale, *zp, *dtype;
  if (!PyArg_UnpackTuple(args, "dequantize_per_tensor", 4, 4, &q, &scale, &zp, &dtype)) return NULL;
  return per_tensor(F.tag_dq, q, scale, zp, dtype, NULL, NULL);
}

/* setup(tensor_type, table, empty_like, raw_stream, modes, tracing, functorch, grad_enabled,
         run_tensor_address) */
static PyObject *setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *o[8], *addr;
  if (!PyArg_UnpackTuple(args, "setup", 9, 9, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &addr))
    return NULL;
  if (!PyType_Check(o[0]) || !PyDict_Check(o[1])) {
    PyErr_SetString(PyExc_TypeError, "setup: expected (type, dict, callables..., address)");
    return NULL;
  }
  void *fn = PyLong_AsVoidPtr(addr);
  if (PyErr_Occurred()) return NULL;
  PyObject **slot[8] = {&F.tensor_type, &F.table, &F.empty_like, &F.raw_stream, &F.modes, &F.tracing,
                        &F.functorch, &F.grad_enabled};
  for (int i = 0; i < 8; i++) {
    PyObject *old = *slot[i];
    Py_INCREF(o[i]);
    *slot[i] = o[i];
    Py_XDECREF(old);
  }
  F.run_tensor = (run_tensor_fn)fn;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(tensor_type, table, empty_like, raw_stream, modes, tracing, functorch, "
                                   "grad_enabled, run_tensor_address)"},
    {"quantize_per_tensor", fast_q, METH_VARARGS,
     "quantize_per_tensor(x, scale, zero_point, dtype, quant_min, quant_max): y, or None for the Python path"},
    {"dequantize_per_tensor", fast_dq, METH_VARARGS,
     "dequantize_per_tensor(q, scale, zero_point, out_dtype): y, or None for the Python path"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
  PyObject *m = PyModule_Create(&module);
  if (!m) return NULL;
#define BQ_STR(field, s) if (!F.field && !(F.field = PyUnicode_InternFromString(s))) goto fail;
  BQ_STR(tag_q, "qpt") BQ_STR(tag_dq, "dqpt") BQ_STR(s_shape, "shape") BQ_STR(s_stride, "stride")
  BQ_STR(s_dtype, "dtype") BQ_STR(s_get_device, "get_device") BQ_STR(s_data_ptr, "data_ptr")
  BQ_STR(s_requires_grad, "requires_grad") BQ_STR(s_plan, "plan") BQ_STR(s_args_address, "args_address")
#undef BQ_STR
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
