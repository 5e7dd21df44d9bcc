"""Server timelines: the one drawing of the fault report's timelines and of the web
dashboard's live strips.

A timeline is one server on a time axis, in lanes from top to bottom:

- ``state``: bands coloured by the server's state (``STATES``), a tick at each
  restart, and above the bands a small triangle at each thing health watching found
  (``HEALTH_MARKS``: stale, found down, recovered);
- ``faults`` (when the ``Layout`` has it): a marker at each injected fault, and a
  faint line down through the calls;
- ``lost`` (when the layout has it): calls that never got an outcome, as crosses;
- ``latency``: each call as a point at its invocation time, as high as its latency on a
  log scale (whole decades, one ``Scale`` shared by a page's timelines so that they
  line up), shaped and coloured by its outcome (``OUTCOMES``).

Every mark has a title, which a browser shows on hover. ``draw_timeline`` returns
the drawing as data, an ``Element`` tree (``_element``): the fault report writes it
as inline SVG with ``markup``, the dashboard sends it to its page, which builds the
same SVG elements from it without parsing any markup. ``legend`` draws the key to
the colours. Both pages style the drawing with ``TIMELINE_CSS``. What the marks say
— which state a band is, which outcome a call had, the words of a title — is the
caller's to know: this package only draws, and imports nothing of the supervisor.

Its Python names are private, imported by the fault report and the dashboard from
``_draw`` and ``_element``.
"""
