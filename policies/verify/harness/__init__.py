"""The policy test harness: the IAM engine behind one Node process per batch, requests as layers, and the
conditions the engine cannot see, decided in the open."""
