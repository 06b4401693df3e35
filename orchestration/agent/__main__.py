from orchestration.agent.main import main

raise SystemExit(main())
