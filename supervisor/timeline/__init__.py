"""Server timelines: the one drawing of the fault report's timelines and of the web
dashboard's live strips.

A timeline is one server on a time axis, in lanes from top to bottom:

- ``state``: bands coloured by the server's state (:data:`STATES`), a tick at each
  restart;
- ``faults`` (when the :class:`Layout` has it): a marker at each injected fault, and a
  faint line down through the calls;
- ``lost`` (when the layout has it): calls that never got an outcome, as crosses;
- ``latency``: each call as a point at its invocation time, as high as its latency on a
  log scale (whole decades, one :class:`Scale` shared by a page's timelines so that they
  line up), shaped and coloured by its outcome (:data:`OUTCOMES`).

Every mark has a title, which a browser shows on hover. :func:`draw_timeline` returns
the drawing as data, an :class:`Element` tree (``_element``): the fault report writes it
as inline SVG with :func:`markup`, the dashboard sends it to its page, which builds the
same SVG elements from it without parsing any markup. :func:`legend` draws the key to
the colours. Both pages style the drawing with :data:`TIMELINE_CSS`. What the marks say
— which state a band is, which outcome a call had, the words of a title — is the
caller's to know: this package only draws, and imports nothing of the supervisor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from ._draw import FAULT_COLOUR as FAULT_COLOUR
    from ._draw import OUTCOMES as OUTCOMES
    from ._draw import STATES as STATES
    from ._draw import TIMELINE_CSS as TIMELINE_CSS
    from ._draw import Band as Band
    from ._draw import Layout as Layout
    from ._draw import Marker as Marker
    from ._draw import Point as Point
    from ._draw import Scale as Scale
    from ._draw import Tick as Tick
    from ._draw import decade as decade
    from ._draw import draw_timeline as draw_timeline
    from ._draw import legend as legend
    from ._draw import seconds as seconds
    from ._draw import shape as shape
    from ._element import Element as Element
    from ._element import markup as markup

__getattr__, __dir__ = attach(__name__)
