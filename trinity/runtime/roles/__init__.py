"""What every role actor is (base) and keeps (protocols): the calls the driver makes on each role."""
