"""Declaration words the parser must know: a line of words that starts with none of these is an unknown directive,
not the head of a declaration (`.visible .global .align 4 .b32 g;`). The ISA's legality checks read them here too."""

from __future__ import annotations

STATE_SPACE_WORDS = frozenset((".reg", ".sreg", ".const", ".global", ".local", ".param", ".shared", ".tex"))
ATTRIBUTE_WORDS = (
    STATE_SPACE_WORDS
    | frozenset((".extern", ".visible", ".weak", ".common", ".align", ".ptr", ".attribute", ".v2", ".v4", ".v8"))
    | frozenset((".texref", ".samplerref", ".surfref", ".pred"))
    | frozenset(f".{kind}{bits}" for kind in "bsuf" for bits in (8, 16, 32, 64, 128))
)
# declaration words that no instruction takes as a modifier: after an opcode (`ret` then `.reg .b32 %r;` on the
# next line) one means a missing `;`, not a modifier written apart (ptxas rejects `ret .reg` too)
DECLARATION_ONLY_WORDS = frozenset(
    (".reg", ".sreg", ".extern", ".visible", ".weak", ".common", ".align", ".ptr", ".attribute")
) | frozenset((".texref", ".samplerref", ".surfref"))
