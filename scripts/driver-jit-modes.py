"""Times the CUDA driver's compile of PTX files five ways, outside the
product: loaded one after another (cuModuleLoadData, as the runtime loads
kernels), from a thread each in one context, from a thread each in a
context of its own, and through the driver's JIT linker (cuLinkAddData of
the PTX, cuLinkComplete, then the cubin loaded) one after another and from
a thread each. Needs only the driver (ctypes on libcuda.so.1).

    CUDA_CACHE_DISABLE=1 python3 scripts/driver-jit-modes.py MODE a.ptx b.ptx ...

MODE: seq, par, parctx, seqlink or parlink. The PTX of a layer's kernels
can be cut out of kernel cache entries (each payload holds every kernel's
PTX), or written by `mla-opt ... --mla-print-ptx=output=all.ptx`.
"""
import ctypes, os, sys, threading, time
mode, files = sys.argv[1], sys.argv[2:]
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0: raise RuntimeError(f"{what}: {r}")
ck(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "dev")
primary = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(primary), dev), "retain")
ptx = [open(f, "rb").read() + b"\0" for f in files]
times = {}
def load(i):
    t = time.perf_counter()
    if mode.endswith("ctx"):
        ctx = ctypes.c_void_p(); ck(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "ctxcreate")
    else:
        ck(cu.cuCtxSetCurrent(primary), "setcurrent")
    mod = ctypes.c_void_p()
    if "link" in mode:
        st = ctypes.c_void_p(); ck(cu.cuLinkCreate_v2(0, None, None, ctypes.byref(st)), "linkcreate")
        ck(cu.cuLinkAddData_v2(st, 1, ptx[i], len(ptx[i]), b"k", 0, None, None), "adddata")  # CU_JIT_INPUT_PTX = 1
        cubin = ctypes.c_void_p(); size = ctypes.c_size_t()
        ck(cu.cuLinkComplete(st, ctypes.byref(cubin), ctypes.byref(size)), "complete")
        ck(cu.cuModuleLoadData(ctypes.byref(mod), cubin), "loadcubin")
        cu.cuLinkDestroy(st)
    else:
        ck(cu.cuModuleLoadData(ctypes.byref(mod), ptx[i]), "load")
    times[os.path.basename(files[i])] = time.perf_counter() - t
start = time.perf_counter()
if mode.startswith("seq"):
    for i in range(len(files)): load(i)
else:
    ts = [threading.Thread(target=load, args=(i,)) for i in range(len(files))]
    for t in ts: t.start()
    for t in ts: t.join()
wall = time.perf_counter() - start
print(f"{mode}: wall {wall*1e3:.0f} ms, sum {sum(times.values())*1e3:.0f} ms; " + ", ".join(f"{k[:-4]} {v*1e3:.0f}" for k, v in sorted(times.items(), key=lambda kv: -kv[1])))
