"""What a compiled kernel library may hold before any process loads it, and the one way tunehub
exports libraries so that they pass.

Loading a shared library runs code before any kernel is called: the dynamic linker calls
``DT_INIT``/``DT_INIT_ARRAY`` constructors (and ``DT_FINI*`` at unload), GNU indirect functions'
resolvers while relocating, and whatever the libraries in ``DT_NEEDED`` do. A kernel's own
code never needs any of that, so `export_library` links without the C runtime's start files
(``-nostartfiles``: no ``_init``/``frame_dummy`` constructors), and `check_library` refuses a
file that has, in its dynamic segment or its section and symbol tables:

* a constructor or destructor of any kind (``DT_INIT``, ``DT_FINI``, ``DT_INIT_ARRAY``,
  ``DT_FINI_ARRAY``, ``DT_PREINIT_ARRAY``, sections ``.init``/``.fini``/``.ctors``/``.dtors``
  or of the init/fini array types);
* a library search path or audit hook (``DT_RPATH``, ``DT_RUNPATH``, ``DT_AUDIT``,
  ``DT_DEPAUDIT``, filters), or a ``DT_NEEDED`` library beyond the C and math libraries;
* an indirect function (``STT_GNU_IFUNC``) or ``IRELATIVE`` relocation;
* an undefined symbol other than TVM's runtime ABI (``TVMFFI*``, ``TVMBackend*``,
  ``__tvm_*``), libm's math, the C library's memory functions and the compiler runtime's
  half-precision conversions (`ALLOWED_UNDEFINED`);
* an interpreter (``PT_INTERP``: an executable, not a library).

The parser reads ELF64 little-endian (x86-64, AArch64) with the standard library only, and
treats every offset as hostile: a malformed file is refused, never half-read.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

MAX_LIBRARY_BYTES = 2 << 30
LINK_OPTIONS = ["-nostartfiles"]

EM_X86_64, EM_AARCH64 = 62, 183
IRELATIVE = {EM_X86_64: 37, EM_AARCH64: 1032}
PT_DYNAMIC, PT_INTERP = 2, 3
SHT_SYMTAB, SHT_RELA, SHT_DYNSYM, SHT_REL = 2, 4, 11, 9
SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY = 14, 15, 16
STT_GNU_IFUNC = 10
DT_NULL, DT_NEEDED = 0, 1
REFUSED_TAGS = {
    12: "DT_INIT",
    13: "DT_FINI",
    15: "DT_RPATH",
    25: "DT_INIT_ARRAY",
    26: "DT_FINI_ARRAY",
    29: "DT_RUNPATH",
    32: "DT_PREINIT_ARRAY",
    0x6FFFFEFB: "DT_DEPAUDIT",
    0x6FFFFEFC: "DT_AUDIT",
    0x7FFFFFFD: "DT_AUXILIARY",
    0x7FFFFFFF: "DT_FILTER",
}
REFUSED_SECTIONS = {".init", ".fini", ".ctors", ".dtors", ".init_array", ".fini_array",
                    ".preinit_array"}  # fmt: skip
ALLOWED_NEEDED = {"libm.so.6", "libc.so.6", "libmvec.so.1"}
_MATH = (
    "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "logb", "erf", "erfc",
    "tanh", "sqrt", "cbrt", "fabs", "floor", "ceil", "round", "trunc", "nearbyint", "rint",
    "lround", "llround", "pow", "fmod", "remainder", "sin", "cos", "tan", "sinh", "cosh", "asin",
    "acos", "atan", "asinh", "acosh", "atanh", "atan2", "copysign", "hypot", "ldexp", "frexp",
    "nextafter", "fma", "fmax", "fmin", "sincos",
)  # fmt: skip
ALLOWED_UNDEFINED = frozenset(
    {name + suffix for name in _MATH for suffix in ("", "f")}
    | {"memcpy", "memmove", "memset", "memcmp", "__memcpy_chk", "__memset_chk"}
    | {"__truncsfhf2", "__extendhfsf2", "__truncdfhf2", "__gnu_h2f_ieee", "__gnu_f2h_ieee"}
    | {"__truncsfbf2", "__truncdfbf2", "__extendbfsf2"}
)
ALLOWED_PREFIXES = ("TVMFFI", "TVMBackend", "__tvm_")
_VERSIONED = re.compile(r"^([A-Za-z0-9_.$]+?)(@@?[A-Za-z0-9_.]+)?$")


class UnsafeLibrary(ValueError):
    """A library that could run code on load, reach beyond the runtime, or is not a well-formed
    ELF64 shared object (the message says which)."""


def export_library(module: Any, path: Path) -> Path:
    """Export a compiled TVM module (an `Executable` or runtime `Module`) as a shared library at
    ``path`` without start files, then `check_library` it; ``path``."""
    module.export_library(str(path), options=list(LINK_OPTIONS))
    check_library(path)
    return path


class _Elf:
    """Bounds-checked reads of one ELF64 little-endian image."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        if len(data) < 64 or data[:4] != b"\x7fELF":
            raise UnsafeLibrary("not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise UnsafeLibrary("not a 64-bit little-endian ELF file")
        (self.type, self.machine) = struct.unpack_from("<HH", data, 16)
        if self.type != 3:
            raise UnsafeLibrary("not a shared object (ET_DYN)")
        if self.machine not in IRELATIVE:
            raise UnsafeLibrary(f"unsupported machine {self.machine}")
        self.phoff, self.shoff = struct.unpack_from("<QQ", data, 0x20)
        self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(
            "<HHHHH", data, 0x36
        )
        if (self.phnum and self.phentsize != 56) or (self.shnum and self.shentsize != 64):
            raise UnsafeLibrary("unexpected header entry sizes")

    def unpack(self, fmt: str, offset: int) -> tuple[Any, ...]:
        if offset < 0 or offset + struct.calcsize(fmt) > len(self.data):
            raise UnsafeLibrary("an offset points outside the file")
        return struct.unpack_from(fmt, self.data, offset)

    def span(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise UnsafeLibrary("a table lies outside the file")
        return self.data[offset : offset + size]

    def program_headers(self) -> list[tuple[int, int, int, int, int]]:
        """(type, offset, vaddr, filesz, memsz) of every program header."""
        headers = []
        for i in range(self.phnum):
            p_type, _flags, off, vaddr, _paddr, filesz, memsz, _align = self.unpack(
                "<IIQQQQQQ", self.phoff + i * 56
            )
            headers.append((p_type, off, vaddr, filesz, memsz))
        return headers

    def sections(self) -> list[dict[str, int]]:
        fields = ("name", "type", "flags", "addr", "offset", "size", "link", "info", "align",
                  "entsize")  # fmt: skip
        return [
            dict(zip(fields, self.unpack("<IIQQQQIIQQ", self.shoff + i * 64), strict=True))
            for i in range(self.shnum)
        ]

    def string(self, table: dict[str, int], index: int) -> str:
        raw = self.span(table["offset"], table["size"])
        if index >= len(raw):
            raise UnsafeLibrary("a name points outside its string table")
        end = raw.find(b"\0", index)
        if end < 0:
            raise UnsafeLibrary("an unterminated name")
        return raw[index:end].decode("ascii", errors="replace")


def check_library(path: Path) -> None:
    """Raise `UnsafeLibrary` unless the file at ``path`` passes every rule of the module."""
    size = path.stat().st_size
    if size > MAX_LIBRARY_BYTES:
        raise UnsafeLibrary(f"the library is larger than {MAX_LIBRARY_BYTES} bytes")
    check_library_bytes(path.read_bytes())


def check_library_bytes(data: bytes) -> None:
    """`check_library` of a library's bytes."""
    elf = _Elf(data)
    _check_dynamic(elf)
    sections = elf.sections()
    if not sections:
        raise UnsafeLibrary("the library has no section table")
    if elf.shstrndx >= len(sections):
        raise UnsafeLibrary("the section-name table index is out of range")
    names = sections[elf.shstrndx]
    for section in sections:
        name = elf.string(names, section["name"])
        if name in REFUSED_SECTIONS or name.startswith((".init_array.", ".fini_array.",
                                                        ".ctors.", ".dtors.")):  # fmt: skip
            raise UnsafeLibrary(f"the library has a {name} section (code run on load)")
        if section["type"] in (SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY):
            raise UnsafeLibrary(f"section {name!r} is a constructor or destructor array")
        if section["type"] in (SHT_SYMTAB, SHT_DYNSYM):
            _check_symbols(elf, section, sections, dynamic=section["type"] == SHT_DYNSYM)
        if section["type"] in (SHT_RELA, SHT_REL):
            _check_relocations(elf, section)


def _check_dynamic(elf: _Elf) -> None:
    headers = elf.program_headers()
    if any(p_type == PT_INTERP for p_type, *_ in headers):
        raise UnsafeLibrary("the file names an interpreter: an executable, not a library")
    dynamic = [h for h in headers if h[0] == PT_DYNAMIC]
    if len(dynamic) != 1:
        raise UnsafeLibrary("a library has exactly one dynamic segment")
    _, offset, _, filesz, _ = dynamic[0]
    entries = []
    for i in range(filesz // 16):
        tag, value = elf.unpack("<qQ", offset + i * 16)
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    for tag, _value in entries:
        if tag in REFUSED_TAGS:
            raise UnsafeLibrary(f"the library has {REFUSED_TAGS[tag]} (code or paths on load)")
    needed = [value for tag, value in entries if tag == DT_NEEDED]
    if needed:
        strtab = _dynamic_strings(elf, entries, headers)
        for index in needed:
            name = _cstring(strtab, index)
            if name not in ALLOWED_NEEDED:
                raise UnsafeLibrary(f"the library needs {name!r}, not only libc and libm")


def _dynamic_strings(elf: _Elf, entries: list[tuple[int, int]], headers: list[Any]) -> bytes:
    table = dict(entries)
    address, size = table.get(5), table.get(10)  # DT_STRTAB, DT_STRSZ
    if address is None or size is None:
        raise UnsafeLibrary("DT_NEEDED without a string table")
    for p_type, off, vaddr, filesz, _ in headers:
        if p_type == 1 and vaddr <= address and address + size <= vaddr + filesz:  # PT_LOAD
            return elf.span(off + address - vaddr, size)
    raise UnsafeLibrary("the dynamic string table is not in a loaded segment")


def _cstring(table: bytes, index: int) -> str:
    end = table.find(b"\0", index)
    if index >= len(table) or end < 0:
        raise UnsafeLibrary("a name points outside its string table")
    return table[index:end].decode("ascii", errors="replace")


def _check_symbols(
    elf: _Elf, table: dict[str, int], sections: list[dict[str, int]], dynamic: bool
) -> None:
    if table["entsize"] != 24 or table["link"] >= len(sections):
        raise UnsafeLibrary("a malformed symbol table")
    strings = sections[table["link"]]
    raw = elf.span(table["offset"], table["size"])
    for start in range(0, len(raw) - len(raw) % 24, 24):
        st_name, st_info, _other, st_shndx, _value, _size = struct.unpack_from(
            "<IBBHQQ", raw, start
        )
        if st_info & 0xF == STT_GNU_IFUNC:
            raise UnsafeLibrary("the library has an indirect function (its resolver runs on load)")
        if not dynamic or st_shndx != 0 or st_name == 0:
            continue
        name = elf.string(strings, st_name)
        match = _VERSIONED.match(name)
        base = match.group(1) if match else name
        if base not in ALLOWED_UNDEFINED and not base.startswith(ALLOWED_PREFIXES):
            raise UnsafeLibrary(
                f"the library calls {base!r}: only TVM's runtime, math and memory functions"
            )


def _check_relocations(elf: _Elf, section: dict[str, int]) -> None:
    entry = 24 if section["type"] == SHT_RELA else 16
    if section["entsize"] not in (0, entry):
        raise UnsafeLibrary("a malformed relocation table")
    raw = elf.span(section["offset"], section["size"])
    irelative = IRELATIVE[elf.machine]
    for start in range(0, len(raw) - len(raw) % entry, entry):
        (info,) = struct.unpack_from("<Q", raw, start + 8)
        if info & 0xFFFFFFFF == irelative:
            raise UnsafeLibrary("the library has an IRELATIVE relocation (code run on load)")
