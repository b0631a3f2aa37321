"""rmlib: the library under the ReflectRM workbook's notebooks.

Importing it first silences, once, the library lines a notebook reader cannot act on
(`rmlib.quiet` lists each with its reason), here and in the engine processes it starts.
"""

from rmlib import quiet

quiet.apply()
