"""ctypes bindings to the vendored llama.cpp, in llama-cpp-python's style."""

import ctypes
import pathlib

_lib = ctypes.CDLL(str(pathlib.Path(__file__).parent / "lib" / "libllama_cpp_shim.so"))


def ctypes_function(name, argtypes, restype):
    def decorator(f):
        func = getattr(_lib, name)
        func.argtypes = argtypes
        func.restype = restype
        return func

    return decorator


@ctypes_function("llama_dot", [ctypes.c_int], ctypes.c_float)
def llama_dot(n: int) -> float:
    ...


@ctypes_function(
    "llama_print_system_info",
    [],
    ctypes.c_char_p,
)
def llama_print_system_info() -> bytes:
    ...
