"""The deploy rehearsal: README's deploy and tear-down against moto's server (`make rehearse`, docs/rehearsal.md)."""
