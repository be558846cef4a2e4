"""Constructs, one per concern. Stacks compose them; policy documents come from policies/."""
