"""cdk-nag for the stacks: acknowledging AwsSolutions findings per construct with a reason (acknowledge), and the
repo's own DataPerimeter rule pack (data_perimeter). stacks/parts/ holds constructs only."""
