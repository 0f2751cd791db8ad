"""Facts about a function that passes stand on: control flow, loops, data flow, register pressure, memory.

Every analysis takes AST nodes and returns new objects; none writes onto the tree.
"""
