from samsa_operator.main import main

main()
