"""The seam to the native code: llama.cpp through llama-cpp-python, and our own native library.

Everything that crosses into C lives here and nowhere else: `llama.py` is the only importer of
`llama_cpp`, `native.py` the only loader of `libworkbench_native.so`, and `abort.py` the atomic
flag llama.cpp polls after every graph node. The layers above (moe/, engine/) see typed Python
objects; this package imports nothing of the workbench but `paths`.
"""
