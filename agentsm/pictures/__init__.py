"""Pictures of machines and runs: the state diagram (Mermaid or an image, with a run's path),
a run's timeline (an image, or as text: `stretches`), and a branch family tree. Images need
matplotlib (`agentsm[pictures]`)."""

from ._mpl import save
from .diagram import path_of, state_diagram, to_mermaid
from .family import family_of, family_tree
from .timeline import Stretch, stretches, timeline

__all__ = [
    "Stretch",
    "family_of",
    "family_tree",
    "path_of",
    "save",
    "state_diagram",
    "stretches",
    "timeline",
    "to_mermaid",
]
