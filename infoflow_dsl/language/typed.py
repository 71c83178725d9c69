"""The typed IR under one name, what every stage after ``check`` reads
(``from ..language import typed as ir``): the expression nodes (:mod:`.nodes`) and the checked
program with its domain and vocabulary (:mod:`.program`)."""

from .lookup_table import Table as Table
from .nodes import *  # noqa: F403  (every node class, type and table of the IR)
from .program import Ball as Ball
from .program import Box as Box
from .program import Program as Program
from .program import Vocabulary as Vocabulary
from .walks import NodeT as NodeT
from .walks import children as children
from .walks import free_variables as free_variables
from .walks import map_children as map_children
from .walks import rename as rename
from .walks import sub_nodes as sub_nodes
