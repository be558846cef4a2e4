"""Verification of the policies, not policies: the documents read back from the synthesized templates
(extract), the IAM engine harness (harness, engine/simulate.mjs), the access matrix (matrix), its mutants
(mutations), the reviewer's report (report) and checkov's second opinion (second_opinion, checkov/).
The builders one level up never import this package.
"""
