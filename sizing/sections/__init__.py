"""The report's sections, its Decision block and its definitions, from the analysed runs."""
