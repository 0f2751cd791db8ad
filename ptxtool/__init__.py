"""ptxtool: a PTX toolchain and optimizer — parse, format, inspect and optimize NVIDIA PTX."""

__version__ = "0.1.0"
