from olcli.cli import main

main()
