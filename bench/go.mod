module github.com/arkflow-rs/arkflow-go/bench

go 1.26

replace github.com/arkflow-rs/arkflow-go => ../
