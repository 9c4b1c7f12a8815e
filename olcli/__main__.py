from olcli.cli import main

if __name__ == "__main__":  # not when multiprocessing's spawn re-imports the main module (Dask workers)
    main()
