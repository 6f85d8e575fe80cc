"""What each ``mace`` command accepts, apart from what it does.

Light on purpose: these modules import argparse and the domain's names only, so that parsing a
command (and its ``--help``) loads no store, no use case and no driver. Each parser names its
handler as ``"module:function"``; the handler's module is loaded only when the command runs.
"""
