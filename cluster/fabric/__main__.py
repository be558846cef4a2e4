from cluster.fabric.cli import main

raise SystemExit(main())
