from bertkit.cli import main

main()
