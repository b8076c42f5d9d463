/* baracuda_quant._fast: the eager per-tensor quantize and dequantize of ops.py in C, for
   the host time of a small call (interpreter steps and a ctypes call cost as much as the
   launch). The stable ABI (one build serves every CPython from 3.9), no torch headers and no
   CUDA: torch is reached through the callables ops.py hands to setup(), and the library
   through the addresses of _capi.c's bq_py_run_tensor in the package's shared object (one
   copy of the library per process). Each function returns the output, or None where the call
   is not for this path (not a plain eager tensor call of a geometry seen before, or a status
   other than 0), and ops.py then takes its Python path, which reports any error.
   public_quantize_per_tensor makes the package's quantize_per_tensor a builtin that does the
   same and then calls the Python function it stands in for, one Python frame less a call. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* (Py_XSETREF is not in the limited API) */
#define BQ_SET(field, value)       \
  do {                             \
    PyObject *old_ = (field);      \
    (field) = (value);             \
    Py_XDECREF(old_);              \
  } while (0)

typedef int (*run_tensor_fn)(const void *plan, const void *args, void *x, void *y, double scale,
                             int64_t zero_point, void *stream);

static struct {
  PyObject *tensor_type; /* torch.Tensor */
  PyObject *table;       /* ops._fast: geometry key -> _core.Prepared */
  PyObject *empty_like, *raw_stream, *modes, *tracing, *functorch, *grad_enabled;
  PyObject *int8, *zero; /* the public function's defaults: torch.int8 (setup_public), 0 */
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
  /* (a fresh keyword dict each call: torch, or a mode it calls, may keep or edit it) */
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

/* The public quantize_per_tensor(x, scale, zero_point=0, dtype=torch.int8, quant_min=None,
   quant_max=None) as a builtin, which saves a Python frame a call: the fast path, else
   `self`, the Python function it stands in for (bound by public_quantize_per_tensor), with
   the same arguments, which checks them, reports any error and keeps the call. */
static PyObject *public_q(PyObject *fallback, PyObject *args, PyObject *kwargs) {
  static char *names[] = {"x", "scale", "zero_point", "dtype", "quant_min", "quant_max", NULL};
  PyObject *x, *scale, *zp = F.zero, *dtype = F.int8, *qmin = Py_None, *qmax = Py_None;
  if (F.int8 && PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOOO:quantize_per_tensor", names, &x, &scale, &zp,
                                            &dtype, &qmin, &qmax)) {
    PyObject *y = per_tensor(F.tag_q, x, scale, zp, dtype, qmin, qmax);
    if (y != Py_None) return y; /* the output, or NULL with torch's exception */
    Py_DECREF(y);
  } else {
    PyErr_Clear(); /* (the Python function names what is wrong with the arguments) */
  }
  return PyObject_Call(fallback, args, kwargs);
}

static PyMethodDef public_q_def = {
    "quantize_per_tensor", (PyCFunction)(void (*)(void))public_q, METH_VARARGS | METH_KEYWORDS,
    "quantize_per_tensor(x, scale, zero_point=0, dtype=torch.int8, quant_min=None, quant_max=None)\n--\n\n"
    "q = sat(rne(x / scale) + zero_point, quant_min, quant_max), int8 or uint8; FP8 (float8_e4m3fn, float8_e5m2): "
    "q = fp8(x / scale), zero_point 0 and no q-range (docs/numerics.md). A repeated call of a geometry seen "
    "before runs from C; any other goes to the Python function this stands in for (its __self__)."};

/* public_quantize_per_tensor(fallback): the builtin above bound to fallback, in fallback's
   module (its __module__; pickle finds it as fallback.quantize_per_tensor, which ops.py sets) */
static PyObject *public_quantize_per_tensor(PyObject *self, PyObject *fallback) {
  (void)self;
  if (!PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "public_quantize_per_tensor: expected a callable");
    return NULL;
  }
  PyObject *mod = PyObject_GetAttrString(fallback, "__module__");
  if (!mod) PyErr_Clear();
  PyObject *fn = PyCFunction_NewEx(&public_q_def, fallback, mod);
  Py_XDECREF(mod);
  return fn;
}

/* setup_public(int8): the public function's default dtype (torch.int8) */
static PyObject *setup_public(PyObject *self, PyObject *i8) {
  (void)self;
  Py_INCREF(i8);
  BQ_SET(F.int8, i8);
  Py_RETURN_NONE;
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
    {"public_quantize_per_tensor", public_quantize_per_tensor, METH_O,
     "public_quantize_per_tensor(fallback): quantize_per_tensor as a builtin, fallback serving what C does not"},
    {"setup_public", setup_public, METH_O, "setup_public(int8): the public function's default dtype"},
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
  if (!F.zero && !(F.zero = PyLong_FromLong(0))) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
