"""Running aws-parallelcluster's own code (schema, update policies) from its isolated virtualenv.

aws-parallelcluster pins CDK v1 and jsii 1.85, so it lives in `.pcluster-venv` (`make pcluster-venv`),
never in the project's .venv. The scripts in this folder run under that interpreter and talk JSON
over stdin/stdout; `cluster.verify.pcluster.runner` calls them from the project's side.
"""
