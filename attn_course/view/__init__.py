"""Looking at attention: static plots and the interactive widgets.
"""
