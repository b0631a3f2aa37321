"""The main module of a process spawned from a notebook's kernel (see
`rmlib.quiet.spawned_children_import_rmlib`).

Importing it imports the rmlib package, whose `__init__` applies `rmlib.quiet` before the child
imports anything else. It holds nothing itself: multiprocessing runs it as the child's
`__mp_main__`, and a module rmlib imports already (as `quiet`) would be run a second time.
"""
