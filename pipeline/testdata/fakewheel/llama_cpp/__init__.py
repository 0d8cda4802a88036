from .llama_cpp import *

__version__ = "0.3.99"
