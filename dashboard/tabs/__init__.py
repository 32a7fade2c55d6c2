"""The dashboard's tabs, one module each (the five component tabs share components.py).

Every module defines its tab as a `base.Tab` (`TAB`, or `TABS` for a family of like tabs): its value in the
tab bar, its label, `layout()` (its components; reads no data) and `register(app, data_dir, max_points)`
(its callbacks). dashboard.app lists them in order and builds the frame around them.
"""
