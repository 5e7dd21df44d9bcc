"""Small helpers several parts share and no user calls: making text printable for a
terminal (:mod:`._printable`), previews and spill files of large results
(:mod:`._previews`, :mod:`._files`), plurals (:mod:`._plural`), making the SDK's
deprecated requests on purpose, without its warning (:mod:`._deprecated`), the package's
own renamed names, which warn once (:mod:`._renamed`), the rule for a URL a server
names (:mod:`._urls`), and a serving process's start-up heap frozen (:mod:`._heap`).

It has no public names: each is imported from its module. It imports nothing of the
package outside itself: every other part may use it.
"""
