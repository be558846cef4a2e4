"""CDK stacks: thin compositions of the constructs in stacks/parts, one construct per concern."""
